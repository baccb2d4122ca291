-- Temporal keeps its own databases beside the service's.
CREATE DATABASE temporal;
CREATE DATABASE temporal_visibility;
