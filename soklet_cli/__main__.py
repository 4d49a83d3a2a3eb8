"""``python -m soklet_cli`` runs the ``soklet`` command."""

from soklet_cli.app import main

main()
