// SPDX-License-Identifier: MIT
// The process-wide state of a rails provider (its devices, workers, registered memory), created at
// first use and kept until exit: a peer may connect to the addresses of a hello before any
// connection of this process holds the state. At exit the holder drops its reference while the
// provider's libraries are still loaded; objects that outlive it keep their own.
#pragma once

#include "base/error.hpp"

#include <memory>
#include <mutex>
#include <string>

namespace pmr::detail::rails {

template <class Process>
class ProcessHolder {
public:
    /// The state, made by `make()` at the first call. @throws UsageError during exit.
    template <class Make>
    static std::shared_ptr<Process> instance(const std::string& where, Make&& make) {
        if (Holder::gone) {
            raise<UsageError>("pmr objects created during exit", where);
        }
        Holder& h = holder();
        std::lock_guard<std::mutex> lock(h.mutex);
        if (!h.process) {
            h.process = make();
        }
        return h.process;
    }

    /// The state if it exists (and the process is not exiting), else null.
    static std::shared_ptr<Process> existing() noexcept {
        if (Holder::gone) {
            return nullptr;
        }
        Holder& h = holder();
        std::lock_guard<std::mutex> lock(h.mutex);
        return h.process;
    }

private:
    struct Holder {
        std::mutex mutex;
        std::shared_ptr<Process> process;
        static inline bool gone = false;
        Holder() = default;
        Holder(const Holder&) = delete;
        Holder& operator=(const Holder&) = delete;
        ~Holder() { gone = true; }
    };

    static Holder& holder() {
        static Holder h;
        return h;
    }
};

} // namespace pmr::detail::rails
