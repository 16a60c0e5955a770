"""The session's output formats, one module each (base.py: what a format is)."""
