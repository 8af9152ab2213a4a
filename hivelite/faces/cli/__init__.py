"""The ``hivelite`` command line (``main`` is the console script)."""
