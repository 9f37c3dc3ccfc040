"""covlib: a small shared library for reproducing verification-in-RAG papers."""

__version__ = "0.1.0"
