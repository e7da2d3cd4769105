"""The one installed command, ``tsbatch <command>``: a table of subcommands, each dispatching
to the ``main(argv)`` of the module that does the work, imported only when it runs."""
