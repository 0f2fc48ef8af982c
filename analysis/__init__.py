"""Turning results folders into numbers, figures and reports (no Mininet, no root).

`load` reads a run folder and checks it against the results contract; `metrics` computes every
number from its tables (pure); `figures` draws them; `summary` writes the terminal summary;
`render` executes the report notebooks headless into HTML and image files.
"""
