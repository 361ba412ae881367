"""Run specs: parsed and checked (``parse.py``), built from CLI options and forms
(``build.py``), read from ``#SBATCH`` files, sweeps, templates and begin times. Imports
only ``runner.notify`` and the bottom layers.
"""
