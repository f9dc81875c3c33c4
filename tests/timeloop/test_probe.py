import numpy as np
import pytest

from mdf_loops.errors import ModelError
from mdf_loops.timeloop.probe import common_value


@pytest.mark.parametrize(
    "seen",
    [
        [np.asarray(1.0), np.asarray(2.5)],
        [np.asarray(1), np.asarray(2)],
        [np.asarray(1), np.asarray(2.0)],
        [np.asarray(np.float32(1)), np.asarray(2.0)],
        [np.asarray(True), np.asarray(False)],
        [np.asarray(-1.0), np.zeros((1, 1))],
        [np.zeros(3, np.int32), np.zeros(3, np.int64)],
    ],
)
def test_common_value_is_zeros_of_the_result_type(seen):
    value = common_value(seen, ("n", "p"))
    assert value.dtype == np.result_type(*seen)
    assert value.shape == seen[-1].shape
    assert not value.any()


def test_common_value_refuses_a_changing_shape():
    with pytest.raises(ModelError, match="node 'n' 'p': its shape changes"):
        common_value([np.zeros(2), np.zeros(3)], ("n", "p"))
