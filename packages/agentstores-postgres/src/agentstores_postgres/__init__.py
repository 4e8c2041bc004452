"""agentstores-postgres: every agentstores store on PostgreSQL, through asyncpg.

``PostgresStores`` lives in :mod:`agentstores_postgres.stores`; this package does not
import it (nor asyncpg) so that discovering the plugin stays cheap.
"""
