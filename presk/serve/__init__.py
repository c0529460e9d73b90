"""Serving: text from a trained model, one generated token at a time (`presk serve`)."""
