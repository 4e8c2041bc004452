"""agentstores on MongoDB (``mongodb://``, ``mongodb+srv://``) through PyMongo's
``AsyncMongoClient``: one header document per conversation is the commit point of every
write; messages, state versions and pause tokens are documents of their own."""

from .stores import MongoStores

__all__ = ["MongoStores"]
