"""Making and checking corpora: fetch from GitHub, read raw exports, redact, freeze into the three
artifacts, verify them, load a public corpus, and locate the published s8f snapshot.
"""
