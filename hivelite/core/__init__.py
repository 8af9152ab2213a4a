"""The core: the task protocol, its models, errors, callers and the guard's rules.

Nothing here knows a store, a plugin or a face; everything else stands on it.
"""
