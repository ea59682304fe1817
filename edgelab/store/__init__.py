"""The database: sqlmodel tables, engine (SQLite default, any SQLAlchemy URL), migrations."""
