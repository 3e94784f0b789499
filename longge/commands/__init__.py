"""The subcommands behind cli.py, by area: node (the link and its emulator), measure."""
