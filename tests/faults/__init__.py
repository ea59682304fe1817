"""The fault suite: frozen, killed and missing processes, bad files, planted secrets, a lab going down."""
