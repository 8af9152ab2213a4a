"""``python -m hivelite`` runs the command line."""

from .cli import main

main()
