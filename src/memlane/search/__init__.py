"""Recall: embedding models and search over stored messages."""
