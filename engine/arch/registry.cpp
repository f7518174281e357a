// Maps general.architecture to the file that implements it.
#include "engine/arch/architecture.h"
#include "engine/arch/llama.h"
#include "engine/util/error.h"

namespace ns {

const char* supported_architectures() { return "llama"; }

std::unique_ptr<Architecture> make_architecture(const Hparams& hp, TensorLoader& loader) {
  if (hp.arch == "llama") return make_llama(hp, loader);
  throw Error(ErrorKind::bad_model, "architecture '" + hp.arch + "' is not supported by this build (supported: " +
                                        supported_architectures() + ")");
}

}  // namespace ns
