"""The qualification matrix: pipeline x device-configuration cells on the ladder of DESIGN §6.

from edgelab.matrix import seed_matrix, set_cell, record_outcome, cell_dict
"""

from edgelab.matrix.cells import cell_dict, matrix_rows, record_outcome, resolve_cell, seed_matrix, set_cell
from edgelab.matrix.ladder import STAGES, STATUS_WORDS
from edgelab.matrix.layout import COLUMNS, ROWS

__all__ = [
    "COLUMNS",
    "ROWS",
    "STAGES",
    "STATUS_WORDS",
    "cell_dict",
    "matrix_rows",
    "record_outcome",
    "resolve_cell",
    "seed_matrix",
    "set_cell",
]
