"""The semantic layer: adjudicated answers with agreement measured (docs/semantic.md).

study (the study file), items (items and blind assignment), events (the append-only event log),
imports (other tools' exports), agreement (percent, kappas, alpha, cluster-bootstrap intervals),
quality (Dawid-Skene), adjudicate (queue and decisions), freeze (semantic.json and the lexical
rule against gold), judge (a model judge and prediction-powered inference), grade (grading
against the layer), widget (`microctx.annotate`), cli (`microctx study`).
"""
