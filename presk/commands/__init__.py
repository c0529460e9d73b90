"""The command layer: one module per subcommand (argparse wiring, printing, exit codes).

The stages below never print, parse flags or choose an exit code; these modules do.
"""
