"""Teaching: the course (exercises, assignments, autograding) and the book. Not part of the students' wheel."""
