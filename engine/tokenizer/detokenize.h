// Text clean-up llama.cpp's detokenizer applies for vocabularies with
// clean_spaces (Hugging Face's clean_up_tokenization_spaces), byte for byte:
//  1. drop a space before ? ! . ,
//  2. " ' " becomes "'" (the spaces around a lone apostrophe go)
//  3. drop the space before the contractions 's 'm 're 've (not 't 'd 'll)
#pragma once

#include <string>

namespace ns::tok {

void clean_up_spaces(std::string& text);

}  // namespace ns::tok
