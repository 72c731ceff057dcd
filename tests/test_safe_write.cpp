// Safe writes (engine/util/safe_write.h): only regular files are written, nothing is replaced
// without overwrite and then only what we wrote, a target that changes while it is written is
// left alone, and staging left by a killed writer is removed by the next one. Each test runs with
// renameat2's atomic renames and with the portable fallback.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/util/safe_write.h"
#include "tests/test_support.h"

namespace ls {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> sorted_entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

bool is_fifo(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

void expect_refused(const Status& s, const std::string& words) {
    ASSERT_FALSE(s.ok()) << "expected a refusal mentioning \"" << words << "\"";
    EXPECT_EQ(s.error().code, ErrorCode::kUsage) << s.error().message;
    EXPECT_NE(s.error().message.find(words), std::string::npos) << s.error().message;
}

Status write_folder(const std::string& path, bool overwrite, const std::vector<std::string>& files) {
    auto folder = StagedFolder::create(path, overwrite);
    if (!folder) return folder.error();
    for (const std::string& name : files) {
        Status s = folder.value()->write_file(name, [&](std::FILE* f) {
            std::fputs(name.c_str(), f);
            return Status{};
        });
        if (!s) return s;
    }
    return folder.value()->commit();
}

class SafeWrite : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override { safe_write_use_portable_renames(GetParam()); }
    void TearDown() override {
        safe_write_use_portable_renames(false);
        fs::remove_all(dir);
    }
    const std::string dir = test::make_temp_dir();
};

INSTANTIATE_TEST_SUITE_P(Renames, SafeWrite, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Portable" : "Renameat2"; });

TEST_P(SafeWrite, OnlyRegularFilesAreWritten) {
    const std::string fifo = dir + "/pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    fs::create_directory(dir + "/folder");
    fs::create_symlink(dir + "/nothing", dir + "/dangling");
    for (bool overwrite : {false, true}) {
        SCOPED_TRACE(overwrite);
        expect_refused(check_file_target(fifo, overwrite), fifo + " is a FIFO (named pipe), not a regular file");
        expect_refused(write_file_safely(fifo, "x", overwrite), "FIFO");
        expect_refused(check_file_target(dir + "/folder", overwrite), "is a folder, not a regular file");
        expect_refused(check_file_target(dir + "/dangling", overwrite), "symbolic link to something that does not exist");
        // A device is refused by its type alone; nothing is ever written to it.
        expect_refused(check_file_target("/dev/null", overwrite), "/dev/null is a character device, not a regular file");
        expect_refused(check_folder_target(fifo, overwrite), "FIFO");
        expect_refused(check_folder_target("/dev/null", overwrite), "character device");
    }
    EXPECT_TRUE(is_fifo(fifo));
    expect_refused(check_file_target("", false), "no output path");
    expect_refused(check_file_target(dir + "/", false), "does not name a file");
    auto missing_parent = check_file_target(dir + "/no/such/x", false);
    ASSERT_FALSE(missing_parent);
    EXPECT_EQ(missing_parent.error().code, ErrorCode::kIo);
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"dangling", "folder", "pipe"}));
}

TEST_P(SafeWrite, AFileIsReplacedOnlyWithOverwrite) {
    const std::string path = dir + "/a.txt";
    ASSERT_TRUE(write_file_safely(path, "first", false));
    expect_refused(write_file_safely(path, "second", false), path + " already exists");
    EXPECT_EQ(read_file(path), "first");
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    ASSERT_TRUE(write_file_safely(path, "second", true));
    EXPECT_EQ(read_file(path), "second");
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the replaced file's permissions were not kept";
    // Through a symbolic link: the file it names is replaced, the link stays.
    fs::create_symlink(path, dir + "/link");
    ASSERT_TRUE(write_file_safely(dir + "/link", "third", true));
    EXPECT_TRUE(fs::is_symlink(dir + "/link"));
    EXPECT_EQ(read_file(path), "third");
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"a.txt", "link"}));
}

// Something that takes the name while the file is written is never replaced by it (a regular
// file only with overwrite).
TEST_P(SafeWrite, ATargetThatAppearsWhileWritingIsLeftAlone) {
    const std::string path = dir + "/out.bin";
    for (bool overwrite : {false, true}) {
        SCOPED_TRACE(overwrite);
        auto staged = StagedFile::create(path, overwrite);
        ASSERT_TRUE(staged) << staged.error().message;
        std::fputs("new", staged.value()->file());
        ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
        expect_refused(staged.value()->commit(), overwrite ? "FIFO" : "already exists");
        EXPECT_TRUE(is_fifo(path));
        staged.value().reset();
        fs::remove(path);
    }
    auto staged = StagedFile::create(path, false);
    ASSERT_TRUE(staged);
    std::fputs("new", staged.value()->file());
    std::ofstream(path) << "the user's";
    expect_refused(staged.value()->commit(), "already exists");
    staged.value().reset();
    EXPECT_EQ(read_file(path), "the user's");
    // With overwrite a regular file that appeared is replaced: that is what overwrite allows.
    staged = StagedFile::create(dir + "/other.bin", true);
    ASSERT_TRUE(staged);
    std::fputs("new", staged.value()->file());
    std::ofstream(dir + "/other.bin") << "old";
    ASSERT_TRUE(staged.value()->commit());
    EXPECT_EQ(read_file(dir + "/other.bin"), "new");
    staged.value().reset();
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"other.bin", "out.bin"}));
}

TEST_P(SafeWrite, AFolderIsReplacedOnlyWhenItIsOursAndHoldsOnlyWhatWeWrote) {
    const std::string path = dir + "/out";
    ASSERT_TRUE(write_folder(path, false, {"a.npy", "manifest.json"}));
    EXPECT_EQ(sorted_entries(path), (std::vector<std::string>{".layerscope-folder.json", "a.npy", "manifest.json"}));
    EXPECT_NE(read_file(path + "/.layerscope-folder.json").find("\"layerscope-folder\""), std::string::npos);
    expect_refused(write_folder(path, false, {"b.npy"}), "already exists");
    ASSERT_TRUE(write_folder(path, true, {"b.npy"}));
    EXPECT_EQ(sorted_entries(path), (std::vector<std::string>{".layerscope-folder.json", "b.npy"}));
    EXPECT_EQ(read_file(path + "/b.npy"), "b.npy");

    // Something of the user's inside it: not replaced.
    std::ofstream(path + "/notes.txt") << "mine";
    expect_refused(write_folder(path, true, {"c.npy"}), "notes.txt");
    fs::remove(path + "/notes.txt");
    fs::create_directory(path + "/sub");
    expect_refused(write_folder(path, true, {"c.npy"}), "sub");
    fs::remove(path + "/sub");
    // A marker of another format, or none: not ours.
    fs::create_directory(dir + "/theirs");
    std::ofstream(dir + "/theirs/.layerscope-folder.json") << R"({"format": "something-else", "files": []})";
    expect_refused(write_folder(dir + "/theirs", true, {"c.npy"}), "not replaced, even with --force");
    fs::create_directory(dir + "/empty");
    expect_refused(write_folder(dir + "/empty", true, {"c.npy"}), ".layerscope-folder.json");
    // A file is not replaced by a folder.
    std::ofstream(dir + "/file") << "x";
    expect_refused(write_folder(dir + "/file", true, {"c.npy"}), "is a regular file, not a folder");
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"empty", "file", "out", "theirs"}));
}

TEST_P(SafeWrite, AFolderThatAppearsWhileWritingIsNeverDeleted) {
    const std::string path = dir + "/out";
    for (bool overwrite : {false, true}) {
        SCOPED_TRACE(overwrite);
        auto folder = StagedFolder::create(path, overwrite);
        ASSERT_TRUE(folder) << folder.error().message;
        ASSERT_TRUE(folder.value()->write_file("a.npy", [](std::FILE*) { return Status{}; }));
        fs::create_directory(path);
        std::ofstream(path + "/notes.txt") << "mine";
        expect_refused(folder.value()->commit(), overwrite ? "not replaced" : "already exists");
        folder.value().reset();
        EXPECT_EQ(sorted_entries(path), std::vector<std::string>{"notes.txt"});
        EXPECT_EQ(sorted_entries(dir), std::vector<std::string>{"out"}) << "the staging folder was left behind";
        fs::remove_all(path);
    }
    // An earlier folder of ours that appeared meanwhile is replaced with overwrite.
    auto folder = StagedFolder::create(path, true);
    ASSERT_TRUE(folder);
    ASSERT_TRUE(write_folder(path, false, {"old.npy"}));
    ASSERT_TRUE(folder.value()->write_file("new.npy", [](std::FILE*) { return Status{}; }));
    ASSERT_TRUE(folder.value()->commit());
    EXPECT_EQ(sorted_entries(path), (std::vector<std::string>{".layerscope-folder.json", "new.npy"}));
    EXPECT_EQ(sorted_entries(dir), std::vector<std::string>{"out"});
}

TEST_P(SafeWrite, UncommittedWritesLeaveNothing) {
    {
        auto file = StagedFile::create(dir + "/a.bin", false);
        ASSERT_TRUE(file);
        std::fputs("half", file.value()->file());
        auto folder = StagedFolder::create(dir + "/f", false);
        ASSERT_TRUE(folder);
        ASSERT_TRUE(folder.value()->write_file("x.npy", [](std::FILE*) { return Status{}; }));
        // Names that would leave the folder, or clash with its marker, are our own mistakes.
        for (const char* bad : {"", "../x", "a/b", ".", "..", ".layerscope-folder.json"})
            EXPECT_FALSE(folder.value()->write_file(bad, [](std::FILE*) { return Status{}; })) << bad;
        EXPECT_EQ(sorted_entries(dir).size(), 2u);
    }
    EXPECT_TRUE(sorted_entries(dir).empty());
}

// A writer killed mid-way (kill -9) leaves its staging entries; the next writer to the same
// target removes them once that process is gone, and nothing else.
TEST_P(SafeWrite, StagingOfAKilledWriterIsRemovedByTheNextOne) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        auto file = StagedFile::create(dir + "/a.bin", false);
        auto folder = StagedFolder::create(dir + "/f", false);
        if (file && folder && folder.value()->write_file("x.npy", [](std::FILE*) { return Status{}; }))
            kill(getpid(), SIGKILL);
        _exit(1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer was not killed midway";
    const std::string dead = std::to_string(child), alive = std::to_string(getppid());
    const std::vector<std::string> left = sorted_entries(dir);
    ASSERT_EQ(left.size(), 2u);
    EXPECT_EQ(left[0].rfind(".a.bin.layerscope-staging." + dead + ".", 0), 0u) << left[0];
    EXPECT_EQ(left[1].rfind(".f.layerscope-staging." + dead + ".", 0), 0u) << left[1];
    // What stays: a live process's staging, names that only resemble ours, another target's, and a
    // folder with our name but not our marker.
    const std::vector<std::string> kept = {".a.bin.layerscope-staging." + alive + ".0", ".a.bin.layerscope-staging.x.0",
                                           ".a.bin.layerscope-staging." + dead, ".b.bin.layerscope-staging." + dead + ".0",
                                           ".f.layerscope-staging." + dead + ".123456789"};
    for (size_t i = 0; i + 1 < kept.size(); ++i) std::ofstream(dir + "/" + kept[i]) << "not ours to remove";
    fs::create_directory(dir + "/" + kept.back());
    std::ofstream(dir + "/" + kept.back() + "/notes.txt") << "mine";

    ASSERT_TRUE(write_file_safely(dir + "/a.bin", "whole", false));
    ASSERT_TRUE(write_folder(dir + "/f", false, {"y.npy"}));
    std::vector<std::string> want = kept;
    want.push_back("a.bin");
    want.push_back("f");
    std::sort(want.begin(), want.end());
    EXPECT_EQ(sorted_entries(dir), want);
    EXPECT_EQ(read_file(dir + "/a.bin"), "whole");
    EXPECT_EQ(read_file(dir + "/" + kept.back() + "/notes.txt"), "mine");
}

TEST_P(SafeWrite, AppendingAcceptsOnlyARegularFile) {
    const std::string log = dir + "/state.log";
    std::ofstream(log) << "line 1\n";
    auto f = open_for_append(log);
    ASSERT_TRUE(f) << f.error().message;
    std::fputs("line 2\n", f.value());
    std::fclose(f.value());
    EXPECT_EQ(read_file(log), "line 1\nline 2\n");
    // A FIFO with no reader would block the program forever: refused at once.
    const std::string fifo = dir + "/pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    auto refused = open_for_append(fifo);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kUsage);
    EXPECT_FALSE(open_for_append(dir));
    EXPECT_FALSE(open_for_append("/dev/null"));
}

}  // namespace
}  // namespace ls
