"""The twin fitted to measurements: profiling runs checked and fitted (mechanism and grey box), then the terms the measured methods' runs calibrate.

Use :func:`calibrate_folder` to make a calibrated twin from a folder in the demeter-ads format
(``flinktune twin calibrate --group-by``, the fidelity benchmarks); the modules hold each step
(``observation_checks``, ``mechanism``, ``grey_box``, ``restart``, ``redeploy_downtime``,
``redeploy_warmup``, ``cpu``, ``busy``). The twin itself (:mod:`flinktune.twin`) never imports this
package: a calibration writes a :class:`~flinktune.twin.profile.ClusterProfile` the twin reads.
"""

from flinktune.calibration.folder import FolderCalibration, calibrate_folder

__all__ = ["FolderCalibration", "calibrate_folder"]
