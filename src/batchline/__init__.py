"""Batchline's shared library: settings, wire names, the job codec, the queue and store
adapters, the error taxonomy, lifecycle and logging. Service logic lives in the services."""
