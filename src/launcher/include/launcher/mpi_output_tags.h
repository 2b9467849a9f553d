// launcher/mpi_output_tags.h — reading mpirun's --tag-output lines back into ranks.
//
// mpirun --tag-output writes each rank's line as "[JOB,RANK]<stdout>:text" (or <stderr>,
// <stddiag>). A rank's last line without a newline runs straight into the next tag
// ("[1,0]<stdout>:partial[1,1]<stdout>:out 1"), so a line may hold several tagged pieces;
// they are split where a well-formed tag of the same job starts. Text before the first tag
// (mpirun's own messages) is a piece with rank -1.
#pragma once

#include <string_view>
#include <vector>

namespace aperture::launcher {

struct TaggedPiece {
  int rank = -1;  // -1: not from a rank (mpirun's own text)
  bool is_stdout = false;  // the tag said <stdout>; otherwise <stderr>/<stddiag> or untagged
  std::string_view text;
};

std::vector<TaggedPiece> split_tagged_line(std::string_view line);

}  // namespace aperture::launcher
