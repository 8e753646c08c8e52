"""The report tool lives in ``recipe.pc_tools.report``; this keeps ``python -m recipe.pc.report`` working."""

from recipe.pc_tools.report import main

if __name__ == "__main__":
    raise SystemExit(main())
