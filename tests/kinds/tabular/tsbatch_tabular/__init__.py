"""The tabular kind's toolkit side: its models.yaml entry, export, sweep, workload and its
``Kind`` record, which this distribution registers under the ``tsbatch.kinds`` entry points."""
