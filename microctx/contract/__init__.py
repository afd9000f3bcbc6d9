"""The contract's rules, shared by every stage: canonical JSON bytes, digests, timestamps, the text
patterns (references, duplicate targets, cue words), the split rule, and the documents' schemas.

Nothing here imports another microctx stage; every other folder builds on it.
"""
