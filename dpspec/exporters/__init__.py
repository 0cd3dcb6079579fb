"""Exporters of specs into other systems' terms (an OpenDP script)."""
