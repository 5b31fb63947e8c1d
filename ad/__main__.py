from ad.cli import main

main()
