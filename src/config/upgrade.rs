//! Placeholder until generation detection and the document upgrade land.
