"""Placeholder: being implemented."""

def sequence_topk_avg_pooling(*args, **kwargs):
    raise NotImplementedError('sequence_topk_avg_pooling')
