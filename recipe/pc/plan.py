"""The plan tool lives in ``recipe.pc_tools.plan``; this keeps ``python -m recipe.pc.plan`` working."""

from recipe.pc_tools.plan import main

if __name__ == "__main__":
    raise SystemExit(main())
