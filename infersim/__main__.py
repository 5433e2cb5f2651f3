from infersim.cli import main

main()
