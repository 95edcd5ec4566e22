"""MHA Explorer's benchmarks: ``python -m bench`` prints one table per section and writes them
to ``bench/results/`` as Markdown and JSON, with a line that describes the machine.

    python -m bench                       # every section, full sizes
    python -m bench --only engine,seeds   # some sections
    python -m bench --quick               # every section once at tiny sizes (the CI smoke test)
    python -m bench --list                # the sections and what they measure

A section is a function ``run(quick: bool) -> list[dict]``: one dict per table row, plain
values only (str, int, float, bool, None). Its docstring is printed under its table, so it
says how the numbers were measured and how to read them. To add one, write the function in a
module of this package and add a line to ``SECTIONS`` in ``bench/registry.py``; the module is
imported only when its section runs. Timings are measured here and never asserted in tests;
goals are stated as ratios measured side by side in one run, because these machines are noisy.
"""
