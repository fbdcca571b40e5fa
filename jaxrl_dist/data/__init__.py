"""The data seam between acting and learning: actors write, the learner loop reads."""
