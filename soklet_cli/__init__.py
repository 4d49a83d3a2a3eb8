"""soklet's command-line interface (``soklet``): a thin Typer layer over ``soklet_core``."""
