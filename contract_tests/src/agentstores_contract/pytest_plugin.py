"""pytest plugin: inert unless --agentstores-url or --agentstores-factory is given."""
