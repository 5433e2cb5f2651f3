"""``python -m infersim.validation validate|calibrate ...``: the two commands without the rest of
the CLI (what ``scripts/gpu_validate.sh`` runs); they live in :mod:`infersim.cli.validate`."""

from infersim.cli.validate import main

if __name__ == "__main__":
    main()
