"""The verbs: the verb table, their inputs, the one write path they run through, the
owner's authority and the plugins' hooks, and each stage's verbs as plain functions of
the store (``handoff``, ``claims``, ``results``, ...).
"""
