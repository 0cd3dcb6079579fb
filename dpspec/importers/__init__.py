"""Importers of the Census Bureau's production configurations (DAS `.ini`, SafeTab-P/H and PHSafe `config.json`) into specs."""
