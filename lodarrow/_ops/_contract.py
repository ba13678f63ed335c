"""How an operator runs on the columns of a table (docs/tables.md).

Each operator module declares a ``TABLE`` mapping from the operator's name to its
:class:`TableContract`; the table engine (``lodarrow._tables._apply``) and ``udf`` read these
declarations and name no operator themselves, so a new operator never edits the table layer.
"""

__all__ = ["TableContract"]


class TableContract:
    """An operator's table form: what its arguments and results mean for table columns.

    Parameters
    ----------
    tensors : tuple of str
        The arguments that take tensors or arrays, so that ``col(...)`` may stand there (a
        bare string there is a column name given without ``col``).
    plain : tuple of str, optional
        Arguments whose *rows* the operator reads: in table form they must be plain columns
        (a list column's rows are its values, not its table rows).
    results : int or callable, default 1
        How many results the operator returns, or a function of the arguments giving it.
    width : str, optional
        The argument that fixes an output's width; without it the width is the data's, so a
        ``udf`` (whose batches must share one schema) requires it.
    udf_columns : tuple of str, optional
        Arguments a ``udf`` needs as columns: a literal value cannot fit every batch.
    check : callable, optional
        ``check(literals)`` runs the operator's own checks of the arguments given as literal
        values (a dict), so a ``udf`` reports them where it is made, not in a worker.
    fixup : callable, optional
        ``fixup(i, result, call, columns, fn)`` turns result ``i`` of the tensor call into its
        table form: ``call`` holds the arguments as passed to the operator and ``columns``
        maps each argument read from a column to whether it is a list column.
    """

    __slots__ = ("tensors", "plain", "results", "width", "udf_columns", "check", "fixup")

    def __init__(self, tensors, *, plain=(), results=1, width=None, udf_columns=(), check=None,
                 fixup=None):
        self.tensors = tuple(tensors)
        self.plain = tuple(plain)
        self.results = results
        self.width = width
        self.udf_columns = tuple(udf_columns)
        self.check = check
        self.fixup = fixup

    def n_results(self, args):
        """How many results a call with ``args`` returns."""
        r = self.results
        return r if isinstance(r, int) else r(args)
