"""How fast and how large: the twin's replay speed, one decision cycle for a fleet, the surrogate's time per decision and the feature ETL's throughput."""
