from edgekit.cli.commands import main

main()
