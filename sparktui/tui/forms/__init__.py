"""Forms: the guided launch form and the pure choices it offers."""
