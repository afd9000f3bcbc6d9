"""The Jupyter side: the corpus explorer widget, `microctx lab` (server), the offline chart renderer."""
