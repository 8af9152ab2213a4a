"""``python -m hivelite`` runs the command line."""

from .faces.cli.main import main

main()
