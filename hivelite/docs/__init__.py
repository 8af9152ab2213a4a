"""The pages generated from the code (``python -m hivelite.docs.cli`` and its kin); a
test holds each page to its generator.
"""
